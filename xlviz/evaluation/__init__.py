"""xlviz.evaluation"""
