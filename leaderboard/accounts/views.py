"""Accounts for model owners: sign-up with email and password (log in/out are Django's views), and
the account page with personal API tokens."""

from __future__ import annotations

from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_post_parameters

from leaderboard.accounts import selectors, tokens
from leaderboard.accounts.forms import SignUpForm


@sensitive_post_parameters("password1", "password2")
def signup(request):
    if request.user.is_authenticated:
        return redirect("leaderboard:submissions")
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("leaderboard:submit")
    return render(request, "registration/signup.html", {"form": form}, status=400 if form.errors else 200)


@login_required
@sensitive_post_parameters("name")
def account(request):
    """``/leaderboard/accounts/``: the owner's personal API tokens, created (shown once) and revoked."""
    new_token, error = "", ""
    if request.method == "POST":
        if request.POST.get("action") == "revoke":
            token_id = request.POST.get("token", "")
            if not token_id.isdigit() or not tokens.token_revoke(owner=request.user, token_id=int(token_id)):
                error = "No such active token."
        else:
            try:
                _, new_token = tokens.token_create(owner=request.user, name=request.POST.get("name", ""))
            except tokens.TokenError as exc:
                error = str(exc)
    context = {"tokens": selectors.tokens_for_owner(request.user), "new_token": new_token, "error": error}
    response = render(request, "registration/account.html", context, status=400 if error else 200)
    response["Cache-Control"] = "no-store"  # the new token is on this page once
    return response
