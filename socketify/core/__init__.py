"""socketify.core"""
