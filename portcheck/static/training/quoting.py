"""How the training rules quote code in a message: on one line, shortened."""


def one_line(code: str, limit: int = 70) -> str:
    text = " ".join(code.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
