#!/usr/bin/python3
print("placeholder")
