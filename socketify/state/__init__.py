"""socketify.state"""
