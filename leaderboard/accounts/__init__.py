"""Accounts: sign up and log in with an email address."""
