"""Values for the planted set (:mod:`evalcore.privacy.planted`), each generated from its published format
with checksums where the format has one, from a seeded ``random.Random``: identity numbers, names and
addresses of several countries, and the secrets people paste. No value is a real person's or a live key.
"""

from __future__ import annotations

import base64
import json
import random
import string

ALNUM = string.ascii_letters + string.digits
FIRST = ["Maria", "James", "Aiko", "Olusegun", "Priya", "Lukas", "Chloé", "Mateo", "Ingrid", "Wei", "Fatima", "Tomasz",
         "Sofia", "Arjun", "Elena", "Kwame", "Hannah", "Diego", "Yuki", "Amelia", "Pierre", "Giulia", "Noah", "Leila"]
LAST = ["Gonzalez", "Whitaker", "Tanaka", "Adeyemi", "Natarajan", "Becker", "Lefèvre", "Fernández", "Lindqvist", "Zhang",
        "Haddad", "Kowalski", "Rossi", "Mehta", "Petrova", "Mensah", "Schmidt", "Alvarez", "Sato", "Clarke", "Dubois",
        "Bianchi", "Fischer", "Karimi"]  # fmt: skip
STREETS = {
    "en": ["{n} {w} Street", "{n} {w} Avenue", "{n} {w} Road", "{n} {w} Lane", "{n} {w} Drive"],
    "de": ["{w}straße {n}", "{w}weg {n}", "{w}gasse {n}"],
    "fr": ["{n} rue de la {w}", "{n} avenue {w}", "{n} boulevard {w}"],
    "es": ["Calle {w} {n}", "Avenida {w} {n}", "Plaza {w} {n}"],
    "it": ["Via {w} {n}", "Viale {w} {n}", "Piazza {w} {n}"],
    "pt": ["Rua {w} {n}", "Travessa {w} {n}"],
    "nl": ["{w}straat {n}", "{w}laan {n}"],
}
STREET_WORDS = {"en": ["Maple", "Baker", "Oak", "Harbour", "Kingsley", "Elm", "Willow"],
                "de": ["Linden", "Berg", "Schiller", "Garten", "Haupt"], "fr": ["Paix", "Victor Hugo", "Liberté", "Gare"],
                "es": ["Mayor", "Alcalá", "Serrano", "Real"], "it": ["Roma", "Garibaldi", "Dante", "Mazzini"],
                "pt": ["Augusta", "Liberdade", "Prata"], "nl": ["Kerk", "Molen", "Beuk"]}  # fmt: skip
TOWNS = {"en": ["Springfield, IL 62704", "London NW1 6XE", "Leeds LS1 4AP", "Boston, MA 02118"],
         "de": ["10115 Berlin", "80331 München"], "fr": ["75002 Paris", "69001 Lyon"], "es": ["28013 Madrid"],
         "it": ["20121 Milano"], "pt": ["1100-053 Lisboa"], "nl": ["1012 AB Amsterdam"]}  # fmt: skip


def token(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def luhn_digit(digits: str) -> str:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 0:
            value *= 2
            value -= 9 if value > 9 else 0
        total += value
    return str((10 - total % 10) % 10)


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def address(rng: random.Random, language: str) -> str:
    street = rng.choice(STREETS[language]).format(n=rng.randrange(1, 400), w=rng.choice(STREET_WORDS[language]))
    return f"{street}, {rng.choice(TOWNS[language])}"


def ssn(rng: random.Random) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}-{rng.randrange(1, 100):02d}-{rng.randrange(1, 10000):04d}"


def nino(rng: random.Random) -> str:
    first = rng.choice("ABCEGHJKLMNOPRSTWXYZ")
    second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    while first + second in ("BG", "GB", "NK", "KN", "TN", "NT", "ZZ"):
        second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    return f"{first}{second}{token(rng, string.digits, 6)}{rng.choice('ABCD')}"


def dni(rng: random.Random) -> str:
    number = rng.randrange(10**7, 10**8)
    return f"{number}{'TRWAGMYFPDXBNJZSQVHLCKE'[number % 23]}"


def pesel(rng: random.Random) -> str:
    digits = f"{rng.randrange(50, 99)}{rng.randrange(1, 13):02d}{rng.randrange(1, 29):02d}{token(rng, string.digits, 4)}"
    check = (10 - sum(int(d) * w for d, w in zip(digits, (1, 3, 7, 9, 1, 3, 7, 9, 1, 3))) % 10) % 10
    return digits + str(check)


ODD = {c: v for c, v in zip("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                             [1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3,
                              6, 8, 12, 14, 16, 10, 22, 25, 24, 23])}  # fmt: skip


def fiscal_code(rng: random.Random) -> str:
    """An Italian codice fiscale: surname and name letters, birth date, a place code, its check letter."""
    body = (token(rng, "BCDFGLMNPRSTVZ", 6) + f"{rng.randrange(40, 99)}" + rng.choice("ABCDEHLMPRST")
            + f"{rng.randrange(1, 29):02d}" + rng.choice("ABCDEFGHLM") + f"{rng.randrange(1, 999):03d}")  # fmt: skip
    total = 0
    for position, char in enumerate(body):
        if position % 2 == 0:
            total += ODD[char]
        else:
            total += int(char) if char.isdigit() else ord(char) - ord("A")
    return body + chr(ord("A") + total % 26)


def pan(rng: random.Random) -> str:
    return token(rng, string.ascii_uppercase, 3) + "P" + rng.choice(string.ascii_uppercase) + token(rng, string.digits, 4) + rng.choice(string.ascii_uppercase)


def dob(rng: random.Random, language: str) -> str:
    year, month, day = rng.randrange(1940, 2006), rng.randrange(1, 13), rng.randrange(1, 29)
    months = {"en": ["January", "March", "May", "July", "September", "November"],
              "de": ["Januar", "März", "Mai", "Juli", "September", "November"],
              "fr": ["janvier", "mars", "mai", "juillet", "septembre", "novembre"],
              "es": ["enero", "marzo", "mayo", "julio", "septiembre", "noviembre"]}  # fmt: skip
    style = rng.randrange(3)
    if style == 0:
        return f"{year}-{month:02d}-{day:02d}"
    if style == 1:
        return f"{day:02d}/{month:02d}/{year}" if language != "en" else f"{month:02d}/{day:02d}/{year}"
    name = rng.choice(months.get(language, months["en"]))
    return {"en": f"{day} {name} {year}", "de": f"{day}. {name} {year}", "fr": f"{day} {name} {year}",
            "es": f"{day} de {name} de {year}"}.get(language, f"{day} {name} {year}")  # fmt: skip


def jwt(rng: random.Random) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    payload = part({"sub": str(rng.randrange(10**9)), "name": "user", "iat": rng.randrange(10**9)})
    return f"{header}.{payload}.{token(rng, ALNUM + '-_', 43)}"


def password(rng: random.Random) -> str:
    words = ["Sommer", "blue", "Falcon", "tiger", "Mango", "river", "Cosmo", "lune", "Perro", "gatto", "Sakura", "Kot"]
    shapes = [lambda: rng.choice(words) + str(rng.randrange(10, 9999)) + rng.choice("!#$%?"),
              lambda: f"{rng.choice(words)}-{rng.choice(words)}-{rng.randrange(10, 99)}",
              lambda: token(rng, ALNUM + "!@#$%&*", rng.randrange(10, 16)),
              lambda: rng.choice(words).lower() + str(rng.randrange(100, 999))]  # fmt: skip
    return rng.choice(shapes)()


SECRET_FORMATS = {
    "aws_access_key_id": lambda rng: "AKIA" + token(rng, string.ascii_uppercase + "234567", 16),
    "aws_secret_access_key": lambda rng: token(rng, ALNUM, 14) + "/" + token(rng, ALNUM, 12) + "+" + token(rng, ALNUM, 12),
    "github_token": lambda rng: rng.choice(["ghp_", "gho_", "ghs_"]) + token(rng, ALNUM, 36),
    "github_fine_grained": lambda rng: "github_pat_" + token(rng, ALNUM, 22) + "_" + token(rng, ALNUM, 59),
    "gitlab_token": lambda rng: "glpat-" + token(rng, ALNUM + "-_", 20),
    "slack_bot_token": lambda rng: f"xoxb-{token(rng, string.digits, 12)}-{token(rng, string.digits, 13)}-{token(rng, ALNUM, 24)}",
    "slack_app_token": lambda rng: f"xapp-1-A{token(rng, string.ascii_uppercase + string.digits, 10)}-"
    f"{token(rng, string.digits, 13)}-{token(rng, '0123456789abcdef', 64)}",
    "stripe_key": lambda rng: rng.choice(["sk_live_", "rk_live_", "sk_test_"]) + token(rng, ALNUM, 24),
    "openai_key": lambda rng: "sk-proj-" + token(rng, ALNUM + "-_", 64),
    "anthropic_key": lambda rng: "sk-ant-api03-" + token(rng, ALNUM + "-_", 93) + "AA",
    "huggingface_token": lambda rng: "hf_" + token(rng, string.ascii_letters, 34),
    "google_api_key": lambda rng: "AIza" + token(rng, ALNUM + "-_", 35),
    "npm_token": lambda rng: "npm_" + token(rng, string.ascii_lowercase + string.digits, 36),
    "digitalocean_token": lambda rng: rng.choice(["dop_v1_", "doo_v1_"]) + token(rng, "0123456789abcdef", 64),
    "sendgrid_key": lambda rng: "SG." + token(rng, ALNUM + "-_", 22) + "." + token(rng, ALNUM + "-_", 43),
    "shopify_token": lambda rng: rng.choice(["shpat_", "shpss_"]) + token(rng, "0123456789abcdef", 32),
    "pypi_token": lambda rng: "pypi-AgEIcHlwaS5vcmc" + token(rng, ALNUM + "-_", 60),
    "jwt": jwt,
    "ssh_public_key": lambda rng: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + token(rng, ALNUM + "+/", 43),
}  # fmt: skip


def private_key(rng: random.Random) -> str:
    body = "\n".join(token(rng, ALNUM + "+/", 64) for _ in range(5))
    kind = rng.choice(["RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY"])
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


def service_url(rng: random.Random) -> str:
    host = rng.choice(["db.internal", "10.0.3.7", "prod-db.example.net", "cache.local", "rabbit.internal"])
    user, secret = rng.choice(["app", "admin", "svc"]), token(rng, ALNUM, 14)
    return rng.choice([f"postgres://{user}:{secret}@{host}:5432/prod", f"mysql://{user}@{host}:3306/shop",
                       f"redis://:{secret}@{host}:6379/0", f"amqp://{user}:{secret}@{host}:5672/vhost",
                       f"mongodb+srv://{user}:{secret}@cluster0.{token(rng, string.ascii_lowercase, 5)}.mongodb.net/test",
                       f"jdbc:postgresql://{host}:5432/ledger?user={user}&password={secret}"])  # fmt: skip


def token_url(rng: random.Random) -> str:
    key = rng.choice(["access_token", "accessToken", "auth_token", "authToken", "api_key", "apiKey", "access_key",
                      "X-Amz-Signature", "sig", "client_secret", "sessionid", "private_token", "key"])
    host = rng.choice(["api.example.com", "hooks.example.org", "files.example.net", "s3.example.io"])
    return f"https://{host}/v1/items?page={rng.randrange(1, 9)}&{key}={token(rng, ALNUM, rng.randrange(16, 40))}"


def credential_url(rng: random.Random) -> str:
    return f"https://{token(rng, string.ascii_lowercase, 6)}:{token(rng, ALNUM, 14)}@git.example.com/team/repo.git"
