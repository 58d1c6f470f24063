"""pulsarlab.chaos"""
