"""Documents and retrieval (issue 28): parsing, chunking, embedding, the index and retrieval."""
