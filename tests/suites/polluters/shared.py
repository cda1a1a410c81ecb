"""State that lives as long as the pytest process: what a polluter leaves behind."""

dirty = False
