"""workers.supervise"""
