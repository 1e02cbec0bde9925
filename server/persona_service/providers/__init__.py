"""Model providers: text generation (whole and streamed), moderation and
embeddings behind one interface, chosen by configuration."""
