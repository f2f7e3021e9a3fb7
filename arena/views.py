from django.shortcuts import render


def arena_index(request):
    return render(request, "arena/index.html")
