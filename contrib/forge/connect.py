"""The one place a forge is made from a workspace's config and a token.

Apart from :mod:`contrib.forge.api` so that the protocol never imports its
implementation: PyGithub loads only here, and only when a forge is needed.
"""

from __future__ import annotations

from contrib.forge.api import DEFAULT_API_URL, Forge, ForgeFactory, check_api_url, check_token
from contrib.workspace.config import Config


def connect(config: Config, token: str, *, factory: ForgeFactory | None = None) -> Forge:
    """The forge for ``config``'s ``[github] api_url``, authenticated with ``token``."""
    api_url = check_api_url(config.github_api_url or DEFAULT_API_URL,
                            f"{config.path} [github] api_url")
    check_token(token)
    if factory is None:
        from contrib.forge.github import GitHubForge  # PyGithub: 0.3 s of imports, loaded on use

        factory = GitHubForge
    return factory(api_url, token)
