"""workers.shared"""
