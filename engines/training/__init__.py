"""engines training"""
