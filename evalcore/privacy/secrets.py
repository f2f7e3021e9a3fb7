"""Secrets as a person types them in a sentence, which token-format rules miss.

Gitleaks and detect-secrets know tokens by their prefix (``ghp_``, ``xoxb-``) or by an assignment in
code (``aws_secret_access_key = "..."``). A voter writes "my AWS secret is wJalr.../K7MDENG...", "pw:
hunter2!", "Passwort ist Sommer2024" or pastes a bare key. Three detectors cover that:

- **a password cue** (in twelve languages: password, passwd, pwd, pw, passcode, passphrase, Passwort,
  Kennwort, mot de passe, contraseña, senha, wachtwoord, hasło, şifre, parola, пароль, 密码, パスワード,
  비밀번호, ...) followed within a few words by a copula or a colon ("is", "ist", "est", "=", ":"):
  the next token is the password, whatever it looks like, unless it is an ordinary word of the
  sentence ("my password is too short", "the password is incorrect");
- **a secret cue** (secret, token, key, api, auth, credential, bearer, Schlüssel, clé, jeton, clave,
  chave, chiave, sleutel, klucz, ключ, токен, 密钥, 令牌, トークン, ...) followed within a few words by
  a token that looks random: at least 12 characters of a key's alphabet, two kinds of character and
  Shannon entropy of 3 bits or more (so "the key is to rest" and "API version 2" stay);
- **a bare key**: a token of 24 characters or more with upper case, lower case and digits and entropy
  of 4 bits or more (a cloud secret, an AWS secret access key with its ``/``), or 40 characters of
  base64 with a ``/`` or ``+`` inside, whatever the words around it.
"""

from __future__ import annotations

import regex

from evalcore.privacy.gitleaks import shannon

# Words that name a password (the next token is one), and words that name another secret.
PASSWORD_WORDS = (
    r"pass(?:word|wd|code|phrase|wort)|pwd|pw|kennwort|mot\s+de\s+passe|mdp|contrase[ñn]a|senha|"
    r"wachtwoord|has[łl][oa]|[şs]ifre(?:m|n|miz|niz|si)?|parola(?:m|n|s[ıi])?|parola\s+d'ordine|пароль|密码|口令|パスワード|비밀번호|lösenord|losenord|adgangskode"
)
SECRET_WORDS = (
    r"secret|secrets|token|tokens|key|keys|apikey|api|auth|authorization|credentials?|bearer|"
    r"schl[üu]ssel|geheimnis|cl[ée]|jeton|clave|secreto|chave|segredo|chiave|segreto|sleutel|klucz|anahtar|"
    r"ключ|токен|секрет|密钥|秘钥|令牌|トークン|キー|秘密鍵|토큰|키"
)
# What may stand between a cue and its value: a few short words, a copula, a colon or an equals sign.
FILLER = (
    r"(?:[\s\"'`(\[]*(?:is|was|are|ist|est|es|é|è|e|er|jest|je|sono|это|now|my|the|our|new|here|for|of|de|du|la|le|"
    r"el|mi|mon|mein|meine|il|do|da|to|i|ma|mój|moje)\b[\s\"'`)\]]*"  # a short word
    r"|[\s\"'`(\[]*(?:[:=：]|-+>|=>)[\s\"'`)\]]*"  # a colon, an equals sign, an arrow
    r"|\s*[是为為は：]\s*"  # a CJK copula, no word boundary around it
    r"|\s+)"
)
VALUE = r"(?P<value>[^\s\"'`<>\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]{4,200})"
EDGE = r"[\p{Latin}\p{Cyrillic}\p{Greek}\p{N}_]"  # a cue is a whole word in alphabetic scripts; CJK has no spaces
PASSWORD_CUE = regex.compile(
    rf"(?i)(?<!{EDGE})(?:{PASSWORD_WORDS})(?!{EDGE})(?:{FILLER}){{1,4}}{VALUE}", regex.V1
)
SECRET_CUE = regex.compile(
    rf"(?i)(?<!{EDGE})(?:{SECRET_WORDS})(?!{EDGE})[\w\-]{{0,20}}(?:{FILLER}|\s*[\w\-]+\s+){{1,4}}{VALUE}",
    regex.V1,
)
KEY_ALPHABET = regex.compile(r"[A-Za-z0-9_\-+/=.~!@#$%^&*]+")
BARE = regex.compile(r"(?<![A-Za-z0-9_\-+/=])[A-Za-z0-9_\-+/=]{24,512}(?![A-Za-z0-9_\-+/=])")
# Ordinary words that follow "password is": the sentence talks about a password, it does not give one.
ORDINARY = frozenset(
    """
    too not incorrect wrong invalid expired required correct same weak strong reset changed the a an my your his
    her their our that this it please here below above empty blank missing case sensitive long short secure safe
    stored saved hashed encrypted protected forgotten lost new old different simple complicated hard easy good bad
    ok okay fine set needed mandatory optional shown hidden visible same also still now just only being been
    nicht falsch richtig zu sehr das der die ein eine pas trop faux correct le la les un une incorrecto correcto
    demasiado el los una não errada correta muito
    """.split()
)
TRAILING = ".,;:!?)]}>'\"`"


def _classes(token: str) -> int:
    return sum((any(c.islower() for c in token), any(c.isupper() for c in token), any(c.isdigit() for c in token),
                any(not c.isalnum() for c in token)))  # fmt: skip


def _value_span(found, text: str, trailing: str = TRAILING) -> tuple[int, int, str]:
    start, end = found.span("value")
    while end > start and text[end - 1] in trailing:
        end -= 1
    return start, end, text[start:end]


def _random_looking(token: str, *, minimum: int = 12) -> bool:
    if len(token) < minimum or not KEY_ALPHABET.fullmatch(token):
        return False
    if all(c in "0123456789abcdefABCDEF" for c in token):  # hex: a hash or a key, long enough either way
        return len(token) >= 20
    return _classes(token) >= 2 and shannon(token) >= 3.0 and any(c.isdigit() for c in token)


# A login and its password written as a pair: "login: admin / hunter2", "user=bob pass=..." (the second word).
CREDENTIAL_PAIR = regex.compile(
    r"(?i)\b(?:login|user(?:name)?|benutzer(?:name)?|utilisateur|usuario|utente|usu[áa]rio)\s*[:=]\s*\S+?\s*"
    r"(?:[/|,]|\band\b|\s)\s*(?:(?:pass(?:word)?|pwd|pw)\s*[:=]\s*)?(?P<value>[^\s\"'`<>]{4,200})"
)


def password_spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for found in CREDENTIAL_PAIR.finditer(text):
        start, end, value = _value_span(found, text, ".,;:)]}>'\"`")
        if _classes(value) >= 2 and value.lower() not in ORDINARY:
            spans.append((start, end, "SECRET"))
    for found in PASSWORD_CUE.finditer(text, overlapped=True):
        start, end, value = _value_span(found, text, ".,;:)]}>'\"`")  # a password may end in ! or ?
        if len(value) < 4 or value.lower().strip(TRAILING) in ORDINARY or value.startswith(("<", "http")):
            continue
        spans.append((start, end, "SECRET"))
    return spans


def cued_spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for found in SECRET_CUE.finditer(text, overlapped=True):
        start, end, value = _value_span(found, text)
        if _random_looking(value):
            spans.append((start, end, "SECRET"))
    return spans


def bare_spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for found in BARE.finditer(text):
        token = found.group(0).rstrip(TRAILING)
        if "://" in text[max(0, found.start() - 12) : found.start() + 3]:
            continue  # part of a URL: the URL rules decide
        mixed = _classes(token) >= 3 and shannon(token) >= 4.0
        aws_like = len(token) == 40 and ("/" in token or "+" in token) and _classes(token) >= 3
        if len(token) >= 24 and (mixed or aws_like):
            spans.append((found.start(), found.start() + len(token), "SECRET"))
    return spans


def phrase_spans(text: str) -> list[tuple[int, int, str]]:
    """Every secret the three detectors find in ``text``."""
    return password_spans(text) + cued_spans(text) + bare_spans(text)
