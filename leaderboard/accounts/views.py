"""Accounts for model owners: sign-up with email and password (log in/out are Django's views)."""

from __future__ import annotations

from django.contrib.auth import login
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_post_parameters

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
