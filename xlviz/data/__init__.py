"""xlviz.data"""
