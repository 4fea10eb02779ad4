# ruff: noqa: F821 (train and state are the names the page's fragment defines: this file runs beside its block)
train(state)  # Epilogue of docs/elastic.md's Keras fragment: the page defines train(state) and leaves the call
