"""Network plumbing shared by the chat provider and the embedding backends."""
