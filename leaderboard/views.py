from django.shortcuts import render


def leaderboard_index(request):
    return render(request, "leaderboard/index.html")
