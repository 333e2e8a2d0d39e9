"""HeadwaySpawner: JupyterHub spawns each user's server onto Headway's GPU pool.

    # jupyterhub_config.py
    c.JupyterHub.spawner_class = "headway.jupyterhub.HeadwaySpawner"
    c.HeadwaySpawner.headway_url = "http://headway.example:8080"   # or HEADWAY_SERVER
    c.HeadwaySpawner.headway_token = "hwu_..."  # a member (or admin) token; or HEADWAY_API_TOKEN
    c.HeadwaySpawner.team = "vision"            # where the servers run (default: the token's)
    c.Spawner.start_timeout = 600               # a server may wait in the queue for GPUs
    c.JupyterHub.cleanup_servers = False        # a hub restart keeps the users' servers

Each user's server is a Headway notebook (``hub-USER[-SERVER]``) whose job runs JupyterHub's
single-user server (``python3 -m jupyterhub.singleuser``): it waits in the queue like any job,
gets the profile's GPUs, runs in the job sandbox with a persistent home per hub user, and is
culled by Headway when its kernels and GPUs stay idle. JupyterHub's own proxy and login front
it, as with any spawner; the server's hub token travels from Headway to the job over the API,
never in a job spec or a log.

* ``start`` creates or restarts the notebook and returns its URL once the server answers;
  ``progress`` shows the queue (Headway's pending reason) and start-up on the spawn page.
* ``poll`` asks Headway whether the notebook runs; ``stop`` stops it and waits until its job
  has ended; ``get_state``/``load_state`` keep the notebook's name in the hub's database, so
  a restarted hub finds its users' servers still running.
* The options form offers the server's notebook profiles (``GET /api/v1/notebook-profiles``).

Standard library plus JupyterHub itself; Headway calls run in a thread so the hub's event
loop never waits on them.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import html
import re
from typing import Any, Dict, Optional

from jupyterhub.spawner import Spawner
from traitlets import Float, Unicode, default

from .client import Client, HeadwayError


def _label(text: str, limit: int) -> str:
    """`text` as a DNS label of at most `limit` characters (a hash keeps long or
    rewritten names distinct)."""
    clean = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "user"
    if clean == text and len(clean) <= limit:
        return clean
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:6]
    return clean[: limit - 7].strip("-") + "-" + digest


def queued_message(notebook: dict, now: Optional[datetime.datetime] = None) -> str:
    """What the spawn page says while the server's job waits: its place in
    line, when it is expected to start (when Headway can tell), and why."""
    reason = notebook.get("pending_reason") or "waiting in the queue"
    where = []
    position = notebook.get("queue_position")
    if position:
        where.append("next in line" if position == 1 else "number %d in line" % position)
    expected = notebook.get("expected_start")
    if expected:
        start = datetime.datetime.fromisoformat(expected.replace("Z", "+00:00"))
        now = now or datetime.datetime.now(datetime.timezone.utc)
        minutes = max(0, round((start - now).total_seconds() / 60))
        where.append("expected to start " + ("now" if minutes == 0 else "in about %d min" % minutes))
    return "Queued on the GPU pool" + (" (" + ", ".join(where) + ")" if where else "") + ": " + reason


class HeadwaySpawner(Spawner):
    headway_url = Unicode(
        "", config=True,
        help="Headway's URL; default: $HEADWAY_SERVER, else $HEADWAY_URL, else http://127.0.0.1:8080")
    headway_token = Unicode(
        "", config=True, help="A Headway user token; default: $HEADWAY_API_TOKEN")
    team = Unicode("", config=True, help="The Headway team the servers run in (default: the token's)")
    profile = Unicode(
        "", config=True,
        help="The notebook profile when the options form is not used (default: the server's first)")
    poll_interval = Float(1.0, config=True, help="Seconds between Headway checks while starting")

    notebook_name = Unicode("")  # the Headway notebook this spawner runs (kept in the hub's state)

    # -- Headway -------------------------------------------------------------

    def _client(self) -> Client:
        return Client(self.headway_url or None, self.headway_token or None)

    async def _headway(self, method: str, *args: Any, **kwargs: Any) -> Any:
        def call() -> Any:
            with self._client() as client:
                return getattr(client, method)(*args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(None, call)

    def _notebook_name(self) -> str:
        name = "hub-" + _label(self.user.name, 24)
        if self.name:
            name += "-" + _label(self.name, 10)
        return name

    # -- options form ----------------------------------------------------------

    @default("options_form")
    def _default_options_form(self):
        return self._profiles_form

    async def _profiles_form(self, spawner: "HeadwaySpawner") -> str:
        try:
            profiles = await self._headway("notebook_profiles")
        except HeadwayError as e:
            self.log.warning("Headway notebook profiles: %s", e)
            return ""
        if len(profiles) <= 1:
            return ""
        options = []
        for p in profiles:
            text = p["name"] + (" - " + p["description"] if p.get("description") else "")
            text += " (%d GPU%s)" % (p.get("gpus", 0), "" if p.get("gpus", 0) == 1 else "s")
            options.append('<option value="%s">%s</option>' % (html.escape(p["name"]), html.escape(text)))
        return ('<label for="headway-profile">Profile</label>'
                '<select class="form-control" name="profile" id="headway-profile">%s</select>'
                % "".join(options))

    @default("options_from_form")
    def _default_options_from_form(self):
        def parse(formdata: Dict[str, Any]) -> Dict[str, Any]:
            options: Dict[str, Any] = {}
            if formdata.get("profile"):
                options["profile"] = formdata["profile"][0]
            return options
        return parse

    # -- state -----------------------------------------------------------------

    def load_state(self, state: Dict[str, Any]) -> None:
        super().load_state(state)
        self.notebook_name = state.get("headway_notebook", "")

    def get_state(self) -> Dict[str, Any]:
        state = super().get_state()
        if self.notebook_name:
            state["headway_notebook"] = self.notebook_name
        return state

    def clear_state(self) -> None:
        super().clear_state()
        self.notebook_name = ""

    # -- life cycle --------------------------------------------------------------

    def _server_env(self) -> Dict[str, str]:
        """What the single-user server needs from the hub: JupyterHub's own variables and
        the admin's `Spawner.environment`, not the hub's PATH or locale (the job has its own)."""
        env = self.get_env()
        keep = {k: v for k, v in env.items() if k.startswith("JUPYTERHUB_")}
        for key in self.environment:
            if key in env:
                keep[key] = env[key]
        return {k: str(v) for k, v in keep.items()}

    async def start(self) -> str:
        name = self._notebook_name()
        profile = (self.user_options or {}).get("profile") or self.profile or None
        hub = {"user": _label(self.user.name, 40), "env": self._server_env()}
        try:
            await self._headway("start_notebook", name, team=self.team or None, profile=profile,
                                jupyterhub=hub)
        except HeadwayError as e:
            if e.code != "Conflict" or "already running" not in e.message:
                raise
            # Headway still runs a server the hub had given up on: a fresh one gets the
            # hub's new token.
            await self._stop_and_wait(name)
            await self._headway("start_notebook", name, team=self.team or None, profile=profile,
                                jupyterhub=hub)
        self.notebook_name = name
        while True:
            notebook = await self._headway("get_notebook", name)
            if notebook.get("ready") and notebook.get("server_url"):
                return notebook["server_url"]
            if notebook.get("state") != "Running":
                raise RuntimeError("Headway notebook %s did not start: %s"
                                   % (name, notebook.get("message") or notebook.get("state")))
            await asyncio.sleep(self.poll_interval)

    async def progress(self):
        name = self._notebook_name()
        while True:
            try:
                notebook = await self._headway("get_notebook", name)
            except HeadwayError:
                notebook = None
            if notebook is None or notebook.get("state") != "Running":
                yield {"progress": 5, "message": "Asking Headway for a server"}
            elif notebook.get("ready"):
                yield {"progress": 90, "message": "The server is up"}
                return
            elif notebook.get("job_state") == "Queued":
                yield {"progress": 20, "message": queued_message(notebook)}
            else:
                yield {"progress": 60, "message": "Starting Jupyter on the pool (%s)"
                       % notebook.get("job", "")}
            await asyncio.sleep(self.poll_interval)

    async def poll(self) -> Optional[int]:
        if not self.notebook_name:
            return 0
        try:
            notebook = await self._headway("get_notebook", self.notebook_name)
        except HeadwayError as e:
            if e.code == "NotFound":
                return 0
            # Headway cannot be asked now: say the server runs rather than have the hub
            # drop a server that may well be there.
            self.log.warning("Headway poll of %s: %s", self.notebook_name, e)
            return None
        if notebook.get("state") == "Running":
            return None
        return 0 if notebook.get("state") == "Stopped" else 1

    async def _stop_and_wait(self, name: str, timeout: float = 60.0) -> None:
        try:
            await self._headway("stop_notebook", name)
        except HeadwayError as e:
            if e.code not in ("Conflict", "NotFound"):
                raise
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            try:
                notebook = await self._headway("get_notebook", name)
            except HeadwayError as e:
                if e.code == "NotFound":
                    return
                raise
            if notebook.get("job_state") in (None, "Succeeded", "Failed", "Stopped"):
                return
            await asyncio.sleep(self.poll_interval)

    async def stop(self, now: bool = False) -> None:
        if self.notebook_name:
            await self._stop_and_wait(self.notebook_name)
