"""pulsarlab.report"""
