"""The terminals of Lark's ``common`` library (``%import common.NAME``).

Each is written as a Lark regex with the language of Lark's own ``common.lark`` definition,
as upstream xgrammar 0.2.8 has them. One deliberate detail: ``ESCAPED_STRING`` lets a raw
line break appear inside the quotes (upstream's definition); a backslash escapes any other
character.
"""

from typing import Dict, Optional

__all__ = ["COMMON_TERMINALS", "common_pattern"]

_INT = r"[0-9]+"
_EXP = r"[eE][+\-]?[0-9]+"
_DECIMAL = r"(?:[0-9]+\.[0-9]*|\.[0-9]+)"
_FLOAT = rf"(?:[0-9]+{_EXP}|{_DECIMAL}(?:{_EXP})?)"
_NUMBER = rf"(?:{_FLOAT}|{_INT})"

COMMON_TERMINALS: Dict[str, str] = {
    "DIGIT": r"[0-9]",
    "HEXDIGIT": r"[a-fA-F0-9]",
    "INT": _INT,
    "SIGNED_INT": rf"[+\-]?{_INT}",
    "DECIMAL": _DECIMAL,
    "_EXP": _EXP,
    "FLOAT": _FLOAT,
    "SIGNED_FLOAT": rf"[+\-]?{_FLOAT}",
    "NUMBER": _NUMBER,
    "SIGNED_NUMBER": rf"[+\-]?{_NUMBER}",
    "ESCAPED_STRING": r'"(?:[^"\\]|\\.)*"',
    "LCASE_LETTER": r"[a-z]",
    "UCASE_LETTER": r"[A-Z]",
    "LETTER": r"[A-Za-z]",
    "WORD": r"[A-Za-z]+",
    "CNAME": r"[_A-Za-z][_A-Za-z0-9]*",
    "WS_INLINE": r"[ \t]+",
    "WS": r"[ \t\f\r\n]+",
    "CR": r"\r",
    "LF": r"\n",
    "NEWLINE": r"(?:\r?\n)+",
    "SH_COMMENT": r"#[^\n]*",
    "CPP_COMMENT": r"//[^\n]*",
    "C_COMMENT": r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/",
    "SQL_COMMENT": r"--[^\n]*",
}


def common_pattern(name: str) -> Optional[str]:
    return COMMON_TERMINALS.get(name)
