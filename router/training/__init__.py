"""router training"""
