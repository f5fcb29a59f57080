"""Where the Hub is and who we are to it: the endpoint (``HF_ENDPOINT`` or a setting, for
mirrors) and the optional token, and the mapping of every failure to one typed line."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from engine.base.errors import (
    EngineError,
    HubAccessDenied,
    HubError,
    HubNotFound,
    HubProtocolError,
    HubRateLimited,
    HubUnreachable,
)

DEFAULT_ENDPOINT = "https://huggingface.co"


def resolve_endpoint(setting: str | None = None) -> str:
    """The setting when given, else ``HF_ENDPOINT``, else the Hub itself; no trailing slash."""
    endpoint = (setting or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise HubError(f"The Hub address {endpoint!r} is not an http(s) URL.")
    return endpoint


@dataclass(frozen=True)
class HubAccess:
    """An endpoint and an optional token. The token goes only to ``endpoint``'s host: httpx
    drops ``Authorization`` when a redirect leaves the origin (the CDN gets none)."""

    endpoint: str = DEFAULT_ENDPOINT
    token: str | None = None

    @classmethod
    def from_settings(cls, endpoint: str | None = None, token: str | None = None) -> HubAccess:
        return cls(resolve_endpoint(endpoint), token or None)

    def __repr__(self) -> str:  # never print the token
        return f"HubAccess(endpoint={self.endpoint!r}, token={'set' if self.token else None})"

    @property
    def api_token(self) -> str | bool:
        # False, not None: huggingface_hub would otherwise send a token saved on this machine
        # by another tool, to whatever endpoint this is.
        return self.token or False

    def headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        return build_hf_headers(token=self.api_token, library_name="hearth")

    def resolve_url(self, repo_id: str, revision: str, filename: str) -> str:
        return f"{self.endpoint}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(filename)}"


@contextlib.contextmanager
def hub_errors(what: str) -> Iterator[None]:
    """Turn huggingface_hub's and httpx's exceptions into Hearth's one-line typed errors.

    ``what`` names the thing asked for ("repository org/x", "the search") for the message.
    """
    import httpx
    from huggingface_hub import errors as hf

    try:
        yield
    except EngineError:
        raise
    except hf.GatedRepoError as exc:
        if exc.response is not None and exc.response.status_code == 403:
            raise HubAccessDenied(
                f"{what} is gated and this token has no access: accept its terms on the Hub."
            ) from None
        raise HubAccessDenied(f"{what} is gated: add a Hugging Face token in Settings.") from None
    except (hf.RepositoryNotFoundError, hf.RevisionNotFoundError, hf.EntryNotFoundError):
        raise HubNotFound(f"{what} was not found on the Hub (or it is private).") from None
    except hf.HfHubHTTPError as exc:
        raise status_error(exc.response.status_code if exc.response is not None else 0, what) from None
    except httpx.HTTPStatusError as exc:
        raise status_error(exc.response.status_code, what) from None
    except httpx.TimeoutException:
        raise HubUnreachable(f"The Hub did not answer in time while fetching {what}.") from None
    except (httpx.ConnectError, httpx.NetworkError, hf.OfflineModeIsEnabled):
        raise HubUnreachable(f"Cannot reach the Hub ({what}): check the network connection.") from None
    except httpx.RemoteProtocolError:
        raise HubProtocolError(f"The Hub's answer for {what} broke off.") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise HubProtocolError(f"The Hub's answer for {what} could not be read: {exc}") from None


def status_error(status: int, what: str) -> HubError:
    if status == 401:
        return HubAccessDenied(f"{what} needs a Hugging Face token (gated or private): add one in Settings.")
    if status == 403:
        return HubAccessDenied(f"{what}: access denied; accept its terms on the Hub or check the token.")
    if status == 404:
        return HubNotFound(f"{what} was not found on the Hub.")
    if status == 429:
        return HubRateLimited(f"The Hub is rate-limiting requests ({what}); try again in a minute.")
    if status == 416:
        return HubProtocolError(f"The server refused the byte range asked for ({what}).")
    return HubProtocolError(f"The Hub answered HTTP {status} for {what}.")
