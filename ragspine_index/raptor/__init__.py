"""The summary tree's parts other than the step: summarizers."""
