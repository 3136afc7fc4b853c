"""A synthetic corpus for secret detection: fake but well-formed secrets in tool outputs.

Every secret is generated (seeded, so the corpus is the same each run) in
the shape its issuer uses, and set in text an agent transcript carries:
``env`` dumps, ``cat .env``, ``curl -H``, connection URLs, JSON configs, PEM
files. Look-alikes are values that resemble secrets but are not: hashes,
UUIDs, commit ids, base64 image data, npm integrity digests. None of the
values is a real credential.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


@dataclass(frozen=True)
class Sample:
    """A text and the secrets in it (empty for a look-alike)."""

    kind: str  # the corpus kind: what was planted (or the look-alike's name)
    text: str
    secrets: tuple[str, ...] = field(default=())


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": str(rng.randrange(10**9)), "exp": 1_900_000_000 + rng.randrange(10**6)}
    return f"{header}.{_b64url(json.dumps(claims).encode())}.{_b64url(rng.randbytes(32))}"


def _pem(rng: random.Random, label: str) -> str:
    body = base64.b64encode(rng.randbytes(rng.choice((300, 600, 1190)))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


def _env_dump(rng: random.Random, name: str, value: str) -> str:
    return "\n".join(
        [
            "$ env | sort",
            "HOME=/home/agent",
            f"HOSTNAME={_r(rng, '0123456789abcdef', 12)}",
            "LANG=C.UTF-8",
            f"{name}={value}",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "SHELL=/bin/bash",
            "TERM=xterm-256color",
        ]
    )


def _dotenv(rng: random.Random, name: str, value: str) -> str:
    return "\n".join(
        [
            "$ cat .env",
            "# local development",
            "NODE_ENV=development",
            f"PORT={rng.randrange(3000, 9000)}",
            f"{name}={value}",
            "LOG_LEVEL=debug",
        ]
    )


def _curl(value: str, scheme: str = "Bearer") -> str:
    return (
        f'$ curl -sS -H "Authorization: {scheme} {value}" -H "Accept: application/json" '
        "https://api.example.com/v1/items\n"
        '{"items": [], "next": null}'
    )


def _json_config(name: str, value: str) -> str:
    config = {"service": "billing", "region": "eu-west-1", name: value, "retries": 3}
    return "$ cat config.json\n" + json.dumps(config, indent=2)


def _secrets(rng: random.Random) -> list[Sample]:
    """One sample per planting of each secret kind."""
    aws_id = "AKIA" + _r(rng, UPPER_DIGITS, 16)
    aws_secret = _r(rng, B64, 40)
    ghp = "ghp_" + _r(rng, ALNUM, 36)
    pat = f"github_pat_{_r(rng, ALNUM, 22)}_{_r(rng, ALNUM, 59)}"
    glpat = "glpat-" + _r(rng, URLSAFE, 20)
    team, bot = rng.randrange(10**11, 10**12), rng.randrange(10**12, 10**13)
    slack = f"xoxb-{team}-{bot}-{_r(rng, ALNUM, 24).lower()}"
    stripe = "sk_live_" + _r(rng, ALNUM, 24)
    openai_legacy = f"sk-{_r(rng, ALNUM, 20)}T3BlbkFJ{_r(rng, ALNUM, 20)}"
    openai_proj = "sk-proj-" + _r(rng, URLSAFE, 120)
    anthropic = f"sk-ant-api03-{_r(rng, URLSAFE, 93)}AA"
    google = "AIza" + _r(rng, URLSAFE, 35)
    sendgrid = f"SG.{_r(rng, URLSAFE, 22)}.{_r(rng, URLSAFE, 43)}"
    npm = "npm_" + _r(rng, ALNUM, 36)
    password = _r(rng, ALNUM, 14)
    opaque = _r(rng, URLSAFE, 40)
    salt = _r(rng, ALNUM, 40)
    jwt = _jwt(rng)
    rsa, ec = _pem(rng, "RSA PRIVATE KEY"), _pem(rng, "EC PRIVATE KEY")
    ssh = _pem(rng, "OPENSSH PRIVATE KEY")
    sa_key = _pem(rng, "PRIVATE KEY")
    service_account = json.dumps({"type": "service_account", "private_key": sa_key + "\n"})
    return [
        Sample("aws_access_key", _env_dump(rng, "AWS_ACCESS_KEY_ID", aws_id), (aws_id,)),
        Sample("aws_secret_key", _dotenv(rng, "AWS_SECRET_ACCESS_KEY", aws_secret), (aws_secret,)),
        Sample(
            "aws_secret_key",
            f"$ cat ~/.aws/credentials\n[default]\naws_access_key_id = {aws_id}\n"
            f"aws_secret_access_key = {aws_secret}\n",
            (aws_id, aws_secret),
        ),
        Sample("github_token", _env_dump(rng, "GITHUB_TOKEN", ghp), (ghp,)),
        Sample("github_token", _curl(pat, "token"), (pat,)),
        Sample(
            "gitlab_token",
            f"$ git remote -v\norigin https://oauth2:{glpat}@gitlab.com/acme/app.git (fetch)",
            (glpat,),
        ),
        Sample("slack_token", _json_config("slack_bot_token", slack), (slack,)),
        Sample("stripe_key", _dotenv(rng, "STRIPE_SECRET_KEY", stripe), (stripe,)),
        Sample("openai_key", _env_dump(rng, "OPENAI_API_KEY", openai_legacy), (openai_legacy,)),
        Sample(
            "openai_key", f"$ export OPENAI_API_KEY={openai_proj}\n$ python run.py", (openai_proj,)
        ),
        Sample(
            "anthropic_key",
            _curl(anthropic).replace("Authorization: Bearer", "x-api-key:"),
            (anthropic,),
        ),
        Sample("anthropic_key", _dotenv(rng, "ANTHROPIC_API_KEY", anthropic), (anthropic,)),
        Sample(
            "google_api_key",
            f"fetch(`https://maps.googleapis.com/maps/api/geocode/json?key={google}`)",
            (google,),
        ),
        Sample("sendgrid_key", _json_config("sendgrid", sendgrid), (sendgrid,)),
        Sample("npm_token", f"$ cat ~/.npmrc\n//registry.npmjs.org/:_authToken={npm}\n", (npm,)),
        Sample("jwt", _curl(jwt), (jwt,)),
        Sample("jwt", f'{{"access_token": "{jwt}", "token_type": "bearer"}}', (jwt,)),
        Sample("private_key", "$ cat deploy/id_rsa\n" + rsa, (rsa,)),
        Sample("private_key", "$ cat tls/key.pem\n" + ec + "\n", (ec,)),
        Sample("private_key", "$ cat ~/.ssh/id_ed25519\n" + ssh, (ssh,)),
        Sample("private_key", "$ cat sa.json\n" + service_account, (json.dumps(sa_key)[1:-1],)),
        Sample(
            "password_in_url",
            f"$ psql postgres://app:{password}@db.internal:5432/app\npsql (16.2)",
            (password,),
        ),
        Sample(
            "password_in_url",
            f"$ docker run -e REDIS_URL=redis://:{password}@cache:6379/0 app",
            (password,),
        ),
        Sample(
            "password_in_url",
            _dotenv(rng, "DATABASE_URL", f"mysql://root:{password}@localhost/shop"),
            (password,),
        ),
        Sample("password_env", _dotenv(rng, "DB_PASSWORD", password), (password,)),
        Sample(
            "password_env",
            f"$ PGPASSWORD={password} pg_dump -h db -U app app > dump.sql",
            (password,),
        ),
        Sample("bearer_token", _curl(opaque), (opaque,)),
        Sample("high_entropy_env", _dotenv(rng, "COOKIE_SIGNING_SALT", salt), (salt,)),
        Sample("high_entropy_env", _dotenv(rng, "SESSION_KEY", salt), (salt,)),
    ]


def _lookalikes(rng: random.Random) -> list[Sample]:
    commit = hashlib.sha1(rng.randbytes(20)).hexdigest()
    sha256 = hashlib.sha256(rng.randbytes(20)).hexdigest()
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(rng.randbytes(9)).digest()).decode()
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(90)).decode()
    ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(3)]
    log = "\n".join(
        f"commit {hashlib.sha1(rng.randbytes(8)).hexdigest()}\n"
        f"Author: Dev <dev@example.com>\n\n    fix {i}"
        for i in range(3)
    )
    return [
        Sample("git_commit", log),
        Sample(
            "git_commit",
            f"$ git rev-parse HEAD\n{commit}\n$ git log --oneline -1\n{commit[:7]} Fix build",
        ),
        Sample("sha1", f"$ sha1sum app.tar.gz\n{commit}  app.tar.gz"),
        Sample("sha256", f"$ sha256sum dist/*\n{sha256}  dist/app.whl\n"),
        Sample("sha256", f"$ docker images --digests\napp  latest  sha256:{sha256}  2 days ago"),
        Sample("sha256", json.dumps({"checksum": sha256, "size": 20931})),
        Sample("uuid", json.dumps({"id": ids[0], "request_id": ids[1], "trace": ids[2]}, indent=2)),
        Sample("uuid", f"INFO request {ids[0]} finished in 31 ms (user {ids[1]})"),
        Sample(
            "npm_integrity",
            f'"node_modules/left-pad": {{\n  "version": "1.3.0",\n  "integrity": "{integrity}"\n}}',
        ),
        Sample(
            "base64_image", f'{{"type": "image", "source": {{"type": "base64", "data": "{png}"}}}}'
        ),
        Sample("base64_image", f"![chart](data:image/png;base64,{png})"),
        Sample("etag", f'HTTP/1.1 200 OK\nETag: "{commit}"\nContent-Length: 5120'),
        Sample("env_plain", _env_dump(rng, "GOPATH", "/home/agent/go")),
        Sample(
            "prose",
            "Set the password in the vault, then rotate the API token; never paste the key here.",
        ),
        Sample(
            "code", 'password = os.environ["DB_PASSWORD"]\ntoken = get_token(user)\napi_key = None'
        ),
        Sample(
            "k8s",
            f"$ kubectl get pods\nweb-7d4b9c8f6d-x2k9p   1/1   Running   0   3d\nrev {commit[:12]}",
        ),
    ]


def build_corpus(seed: int = 39, copies: int = 4) -> list[Sample]:
    """``copies`` draws of every secret planting and every look-alike."""
    rng = random.Random(seed)
    makers: tuple[Callable[[random.Random], list[Sample]], ...] = (_secrets, _lookalikes)
    return [sample for _ in range(copies) for make in makers for sample in make(rng)]
