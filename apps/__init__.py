"""dcnlab.apps"""
