"""xlviz.models"""
