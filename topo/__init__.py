"""dcnlab.topo"""
