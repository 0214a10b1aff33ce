"""The skeleton of /userdata/agent/memory, shipped as package data (see README.md inside)."""
