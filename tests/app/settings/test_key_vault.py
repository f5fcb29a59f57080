"""API keys: in the keyring when one works, for the session only (and said so) otherwise."""

from __future__ import annotations

from app.settings.key_vault import NO_KEYRING, SERVICE, KeyVault
from tests.helpers import MemoryKeyring

URL = "http://box:8080/v1"


class BrokenKeyring(MemoryKeyring):
    """A backend that is there but refuses to store (a locked or misconfigured keyring)."""

    refusals = 0

    def set_password(self, service: str, username: str, password: str) -> None:
        self.refusals += 1
        raise RuntimeError("locked")


def test_keys_go_to_the_keyring() -> None:
    keyring = MemoryKeyring()
    vault = KeyVault(keyring)
    vault.set(URL, "k1")
    assert keyring.saved == {(SERVICE, URL): "k1"} and vault.get(URL) == "k1"
    assert vault.persistent and vault.problem == ""
    vault.set(URL, "")  # no key: forgotten
    assert keyring.saved == {} and vault.get(URL) == ""


def test_without_a_keyring_keys_last_the_session_and_the_vault_says_so() -> None:
    vault = KeyVault(None)
    vault.set(URL, "k1")
    assert vault.get(URL) == "k1" and not vault.persistent and vault.problem == NO_KEYRING
    vault.delete(URL)
    assert vault.get(URL) == ""


def test_a_keyring_that_refuses_falls_back_to_the_session() -> None:
    keyring = BrokenKeyring()
    vault = KeyVault(keyring)
    vault.set(URL, "k1")
    assert keyring.refusals == 1
    assert vault.get(URL) == "k1" and vault.problem == NO_KEYRING


def test_the_system_keyring_is_looked_for_on_first_use_only() -> None:
    asked = []

    def find():
        asked.append(1)
        return None, NO_KEYRING

    vault = KeyVault(find=find)
    assert asked == []  # making the window does not wait for D-Bus
    assert vault.get(URL) == "" and vault.problem == NO_KEYRING and asked == [1]
