"""The language table: each language's detection signals and definition patterns, as data.

Plain strings only; ``source`` compiles them on first use (a space in a
pattern matches a space or a tab; a space inside a character class is written
``\\x20``). Adding a language is adding an entry here, its display name and
its file extensions. Tested through ``explore`` in
tests/brain/payloads/test_explore.py (each language detected from content).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class LanguagePatterns:
    """One language's patterns, uncompiled."""

    name: str
    signals: list[str]
    """Alternatives; every match counts towards detecting the language."""
    symbols: dict[str, str]
    """Plural label to a top-level definition pattern: group ``name`` (or ``alt``),
    and for methods maybe ``owner``."""
    imports: str | None
    comment: str
    """A comment or docstring line; group ``text`` is its content."""
    dialect: tuple[str, list[str]] | None = None
    """A dialect named instead when one of these matches (TypeScript, C++)."""
    ignore_case: bool = False


_ID: Final = r"[A-Za-z_$][\w$]*"
_PUB: Final = r"(?:pub(?:\([^)\n]*\))? +)?"
_SLASH_COMMENT: Final = r"^ *(?:///?!?|/\*+|\*(?!/)) *(?P<text>.*?) *(?:\*/)?$"
LANGUAGES: Final = (
    LanguagePatterns(
        "python",
        [
            r"^(?:async +)?def +\w+ *\(|^class +\w+ *[(:]",
            r"^from +[\w.]+ +import\b|^import +[\w.]+(?: +as +\w+)? *$",
            r"^ +(?:if|elif|for|while|with|except)\b.*: *$|^ *(?:try|else|finally): *$",
            r"\bself\.\w|^if __name__ ==",
        ],
        {"classes": r"^class +(?P<name>\w+)", "functions": r"^(?:async +)?def +(?P<name>\w+)"},
        r"^(?:from|import) +(?P<name>\.*[\w.]+)",
        r"^ *(?:[rRuU]?(?:\"\"\"|''')|#(?![!\[])) *(?P<text>.*?)(?:\"\"\"|''')?$",
    ),
    LanguagePatterns(
        "javascript",
        [
            r"^ *(?:export +)?(?:default +)?(?:async +)?function\b",
            r"^ *(?:export +)?(?:const|let|var) +[\w${}\[\],\t\x20]+=",
            r"=>|^ *import\b.*\bfrom *['\"]|\brequire\( *['\"]",
            r"^ *export |\bconsole\.\w+\(|===|!==",
        ],
        {
            "classes": rf"^(?:export +)?(?:default +)?(?:abstract +)?class +(?P<name>{_ID})",
            "interfaces": rf"^(?:export +)?(?:declare +)?interface +(?P<name>{_ID})",
            "types": rf"^(?:export +)?type +(?P<name>{_ID}) *(?:<[^>\n]*>)? *=",
            "functions": (
                rf"^(?:export +)?(?:default +)?(?:async +)?function\*? *(?P<name>{_ID})"
                rf"|^(?:export +)?(?:const|let|var) +(?P<alt>{_ID}) *(?::[^=\n]+)?="
                rf" *(?:async *)?(?:function\b|\([^)\n]*\)[^=\n]*=>|{_ID} *=>)"
            ),
        },
        r"^(?:import\b[^'\"\n]*|\} *from *|(?:const|let|var)\b[^=\n]*= *require\( *)"
        r"['\"](?P<name>[^'\"\n]+)['\"]",
        _SLASH_COMMENT,
        (
            "typescript",
            [
                r"^ *(?:export +)?(?:declare +)?(?:interface|type|enum|namespace) +\w+",
                r"\w *\??: *(?:string|number|boolean|void|any|unknown|never)\b",
                r"\w\??: ?(?:Promise|Record|Array)<|\bas const\b|\bimport type\b",
            ],
        ),
    ),
    LanguagePatterns(
        "go",
        [
            r"^package +\w+ *$|^func\b|:=|^import *\(|\berr != nil\b",
            r"^type +\w+ +(?:struct|interface)\b|\bfmt\.\w+\(",
        ],
        {
            "types": r"^type +(?P<name>\w+)",
            "functions": r"^func +(?P<name>\w+)",
            "methods": r"^func *\( *(?:\w+ +)?\*?(?P<owner>\w+)[^)\n]*\) *(?P<name>\w+)",
        },
        r"^(?:import +|\t)(?:[\w.]+ +)?\"(?P<name>[^\"\n]+)\" *$",
        _SLASH_COMMENT,
    ),
    LanguagePatterns(
        "rust",
        [
            rf"^ *{_PUB}(?:async +)?(?:unsafe +)?fn +\w+|\blet +mut\b|^ *impl\b|^ *#!?\[",
            r"^ *(?:pub +)?use +[\w:]+|^ *pub +(?:struct|enum|trait)",
            r"\b(?:println|vec|format)!\(|&(?:mut +)?self\b",
        ],
        {
            "types": rf"^{_PUB}(?:struct|enum|trait|union) +(?P<name>\w+)",
            "impls": r"^impl\b(?:<[^>\n]*>)? +(?P<name>[^{\n]+?) *(?:where\b.*)?\{",
            "functions": rf"^{_PUB}(?:const +)?(?:async +)?(?:unsafe +)?"
            r"(?:extern +\"[^\"\n]*\" +)?fn +(?P<name>\w+)",
        },
        r"^ *(?:pub +)?use +(?P<name>[^;\n]+);",
        _SLASH_COMMENT,
    ),
    LanguagePatterns(
        "java",
        [
            r"^ *(?:public|private|protected) +(?:static +)?(?:final +)?"
            r"(?:class|interface|enum|record|void|[\w<>\[\],\x20]+ +\w+ *\()",
            r"^import +(?:static +)?[\w.]+(?:\.\*)?;|^package +[\w.]+;",
            r"\bSystem\.(?:out|err)\.|@Override\b",
        ],
        {
            "classes": r"^ *(?:(?:public|private|protected|abstract|final|static|sealed) +)*"
            r"(?:class|interface|enum|record) +(?P<name>\w+)",
            "methods": r"^ +(?:(?:public|private|protected|static|final|abstract|synchronized) +)+"
            r"(?:<[^>\n]+> +)?[\w<>\[\],.?\x20]+? +(?P<name>\w+) *\(",
        },
        r"^import +(?:static +)?(?P<name>[\w.*]+) *;",
        _SLASH_COMMENT,
    ),
    LanguagePatterns(
        "c",
        [
            r"^ *# *(?:include|define|ifn?def|endif|pragma)\b|\b(?:printf|malloc|free|sizeof)\(",
            r"^(?:static +)?(?:int|void|char|unsigned|long|double|float|size_t|bool)[\t\x20*]+\w+"
            r" *\([^;\n]*\) *\{? *$",
            r"\bstd::|^ *(?:template *<|namespace +\w+)",
        ],
        {
            "types": r"^(?:typedef +)?(?:struct|class|union|enum(?: +class)?) +(?P<name>\w+)"
            r" *(?::[^{;\n]*)?\{? *$",
            "functions": r"^(?!(?:if|else|for|while|switch|return|case|do|typedef|goto)\b)"
            r"[A-Za-z_][\w:<>,*&\t\x20]*[\t\x20*&](?P<name>~?[A-Za-z_][\w:]*) *\([^;\n]*\)"
            r" *(?:const *)?(?:noexcept *)?\{? *$",
        },
        r"^ *# *include *[<\"](?P<name>[^>\"\n]+)[>\"]",
        _SLASH_COMMENT,
        (
            "cpp",
            [
                r"\bstd::|^ *(?:template *<|namespace +\w+|using +namespace\b)",
                r"^ *(?:class +\w+|(?:public|private|protected):)",
                r"#include *<(?:iostream|vector|string|memory|map|unordered_map|algorithm)>",
            ],
        ),
    ),
    LanguagePatterns(
        "shell",
        [
            r"^#!.*\b(?:ba|z|k|da)?sh\b|^ *(?:if|elif|while) +\[\[? ",
            r"^ *(?:fi|done|esac|then|do) *$|^ *(?:export|local|readonly) +\w+=",
            r"^ *set +-[euxo]|\$\(|\$\{\w+|^ *echo ",
        ],
        {
            "functions": r"^ *(?:function +(?P<name>[\w:.-]+) *(?:\(\))? *\{"
            r"|(?:function +)?(?P<alt>[A-Za-z_][\w:.-]*) *\(\) *\{?)",
        },
        r"^ *(?:source|\.) +(?P<name>\S+)",
        r"^ *#(?![!\[]) *(?P<text>.*)$",
    ),
    LanguagePatterns(
        "sql",
        [
            r"^ *(?:select +[\w*]|insert +into |update +\w+ +set\b|delete +from ",
            r"create +(?:table|index|view|unique +index|trigger)\b|alter +table ",
            r"drop +(?:table|index|view) |with +\w+ +as *\()",
        ],
        {
            "tables": r"^ *create +(?:or +replace +)?(?:temp(?:orary)? +)?(?:virtual +)?"
            r"(?:table|view) +(?:if +not +exists +)?(?P<name>[\w.\"`\[\]]+)",
            "indexes": r"^ *create +(?:unique +)?index +(?:if +not +exists +)?"
            r"(?P<name>[\w.\"`\[\]]+)",
        },
        None,
        r"^ *-- *(?P<text>.*)$",
        ignore_case=True,
    ),
)

DIALECTS: Final = {"typescript": "javascript", "cpp": "c"}
"""A dialect to the language whose patterns it shares."""
SHEBANG_LANGUAGES: Final = {"node": "javascript", "deno": "javascript", "bun": "javascript"}
"""Shebang interpreters other than python and the shells."""
DISPLAY: Final = {
    "python": "Python",
    "javascript": "JavaScript",
    "typescript": "TypeScript",
    "go": "Go",
    "rust": "Rust",
    "java": "Java",
    "c": "C",
    "cpp": "C++",
    "shell": "Shell",
    "sql": "SQL",
}
EXTENSIONS: Final = {
    **dict.fromkeys(["py", "pyi"], "python"),
    **dict.fromkeys(["js", "mjs", "cjs", "jsx"], "javascript"),
    **dict.fromkeys(["ts", "tsx", "mts", "cts"], "typescript"),
    **dict.fromkeys(["c", "h"], "c"),
    **dict.fromkeys(["cc", "cpp", "cxx", "hpp", "hh"], "cpp"),
    **dict.fromkeys(["sh", "bash", "zsh"], "shell"),
    "go": "go",
    "rs": "rust",
    "java": "java",
    "sql": "sql",
}
"""A file extension in a hint to its language."""
