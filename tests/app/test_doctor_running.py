"""`tandem doctor` against the running app: its own port is Tandem serving, not a failure."""


def test_doctor_recognises_a_running_tandem_on_its_port(base_url):
    from router.tools.doctor import check_port
    from tests.listener import Listener

    port = int(base_url.rsplit(":", 1)[1].strip("/"))
    check = check_port(port)
    assert check.ok and "Tandem is serving there" in check.detail and "policy version" in check.detail
    with Listener() as other:  # something else on a port: still a failure with a fix
        busy = check_port(int(other.url.rsplit(":", 1)[1]), host="127.0.0.1")
    assert not busy.ok and "in use" in busy.detail
