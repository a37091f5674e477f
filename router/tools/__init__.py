"""router tools"""
