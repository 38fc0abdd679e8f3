"""dcnlab.benchmarks"""
