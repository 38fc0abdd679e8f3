"""dcnlab.controller"""
