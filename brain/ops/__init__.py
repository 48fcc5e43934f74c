"""Operations: grants (delegated expansion) and ``brain doctor``."""
