"""Prompt templates for the Planner, the Coder and the rubric judge (package data,
`string.Template`).
"""
