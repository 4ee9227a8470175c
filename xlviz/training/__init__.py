"""xlviz.training"""
