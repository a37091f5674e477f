"""policies tools"""
