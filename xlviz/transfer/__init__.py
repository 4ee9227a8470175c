"""Whole transfer runs: configuration, the resumable MONOTRANS pipeline, result tables."""
