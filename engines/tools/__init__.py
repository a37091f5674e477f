"""engines tools"""
