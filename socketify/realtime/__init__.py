"""socketify.realtime"""
