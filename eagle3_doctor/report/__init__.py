"""Every text and picture a result becomes: terminal, Markdown, annotations (render) and plots."""
