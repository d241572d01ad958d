"""Sign-in, the shared layout and error pages of the server-rendered pages."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

pytestmark = pytest.mark.django_db

PAGES = ["pages:runs", "pages:tonight", "pages:coverage", "pages:candidates"]


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_the_sign_in_page_renders_the_login_form(client) -> None:
    response = client.get(reverse("login"))
    html = response.content.decode()
    assert response.status_code == 200
    assert [t.name for t in response.templates][0] == "registration/login.html"
    assert 'name="username"' in html and 'name="password"' in html and "csrfmiddlewaretoken" in html
    assert 'href="/static/evalhub/evalhub.css"' in html


def test_signing_in_lands_on_the_run_history(client, django_user_model) -> None:
    django_user_model.objects.create_user("ada", password="pw-ada-12345")
    response = client.post(reverse("login"), {"username": "ada", "password": "pw-ada-12345"})
    assert response.status_code == 302
    assert response["Location"] == reverse("pages:runs")


def test_signing_in_returns_to_the_page_asked_for(client, django_user_model) -> None:
    django_user_model.objects.create_user("ada", password="pw-ada-12345")
    response = client.post(reverse("login"), {"username": "ada", "password": "pw-ada-12345", "next": reverse("pages:coverage")})
    assert response["Location"] == reverse("pages:coverage")


def test_a_wrong_password_is_explained(client, django_user_model) -> None:
    django_user_model.objects.create_user("ada", password="pw-ada-12345")
    response = client.post(reverse("login"), {"username": "ada", "password": "nope"})
    assert response.status_code == 200
    assert "Your username and password didn't match" in response.content.decode()


@pytest.mark.parametrize("name", PAGES)
def test_every_page_has_the_navigation_and_a_sign_out_button(reader_client, name: str) -> None:
    html = reader_client.get(reverse(name)).content.decode()
    for other in PAGES:
        assert f'href="{reverse(other)}"' in html
    assert f'action="{reverse("logout")}"' in html
    assert 'aria-current="page"' in html
    assert reverse("admin:index") not in html  # the admin link is for staff only


def test_every_page_links_the_api_where_the_readme_presents_it(reader_client) -> None:
    html = reader_client.get(reverse("pages:runs")).content.decode()
    nav = html[html.index('<nav class="site-nav"') : html.index("</nav>")]
    assert f'<a href="{reverse("api-root")}">API</a>' in nav
    assert reverse("api-root") == "/api/"


def test_staff_see_the_admin_link(staff_client) -> None:
    assert f'href="{reverse("admin:index")}"' in staff_client.get(reverse("pages:runs")).content.decode()


def test_signing_out_ends_the_session(reader_client) -> None:
    response = reader_client.post(reverse("logout"))
    assert response.status_code == 302
    assert reader_client.get(reverse("pages:runs")).status_code == 302


def test_an_unknown_address_is_the_plain_404_page(reader_client) -> None:
    response = reader_client.get("/no-such-page/")
    assert response.status_code == 404
    assert "There is nothing at this address" in response.content.decode()


def test_the_stylesheet_is_a_local_static_file() -> None:
    path = finders.find("evalhub/evalhub.css")
    assert path
    with open(path, encoding="utf-8") as stylesheet:
        css = stylesheet.read()
    assert "http://" not in css and "https://" not in css and "@import" not in css
