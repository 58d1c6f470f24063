"""pulsarlab.admin"""
