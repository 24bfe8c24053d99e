"""Reading text: sentences, claims, statements and token counts. No policy lives here."""
