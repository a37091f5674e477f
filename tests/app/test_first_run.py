"""A first run: `tandem doctor` sees the running app as Tandem serving (not a taken port), and no
page of the app needs the network (/docs would load its assets from a CDN)."""

import httpx


def test_doctor_recognises_a_running_tandem_on_its_port(base_url):
    from tandem.doctor import check_port
    from tests.listener import Listener

    port = int(base_url.rsplit(":", 1)[1].strip("/"))
    check = check_port(port)
    assert check.ok and "Tandem is serving there" in check.detail and "policy version" in check.detail
    with Listener() as other:  # something else on a port: still a failure with a fix
        busy = check_port(int(other.url.rsplit(":", 1)[1]), host="127.0.0.1")
    assert not busy.ok and "in use" in busy.detail


def test_no_page_needs_a_cdn(base_url):
    for page in ("/docs", "/redoc"):
        missing = httpx.get(f"{base_url}{page}", timeout=10)
        assert missing.status_code == 404 and missing.json()["error"]["type"]
    schema = httpx.get(f"{base_url}/openapi.json", timeout=10)
    assert schema.status_code == 200 and "/v1/chat/completions" in schema.json()["paths"]


def test_tandem_serve_says_once_when_the_app_is_ready(base_url, capsys):
    from tandem.serve import DEFAULT_CONFIG, announce, config_port

    port = int(base_url.rsplit(":", 1)[1].strip("/"))
    assert announce(port, wait_s=30)
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"Tandem ready at http://localhost:{port}/v1") and "checkpoint" in line and "policy version" in line
    assert config_port(DEFAULT_CONFIG) == 8000
