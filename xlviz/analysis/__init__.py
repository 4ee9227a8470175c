"""xlviz.analysis"""
