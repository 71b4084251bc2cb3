// A vector with room for N elements inline before it allocates.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

namespace geom {

template <class T, std::size_t N>
class SmallVec {
 public:
  SmallVec() = default;
  SmallVec(const SmallVec &o) { append(o.begin(), o.end()); }
  SmallVec &operator=(const SmallVec &o) {
    if (this != &o) {
      clear();
      append(o.begin(), o.end());
    }
    return *this;
  }
  ~SmallVec() {
    clear();
    if (data_ != inline_data()) std::free(data_);
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T *begin() { return data_; }
  T *end() { return data_ + size_; }
  const T *begin() const { return data_; }
  const T *end() const { return data_ + size_; }
  T &operator[](std::size_t i) { return data_[i]; }
  const T &operator[](std::size_t i) const { return data_[i]; }
  T &back() { return data_[size_ - 1]; }

  void push_back(const T &v) {
    if (size_ == cap_) grow(cap_ * 2);
    new (data_ + size_) T(v);
    ++size_;
  }
  void pop_back() { data_[--size_].~T(); }
  void clear() {
    while (size_) pop_back();
  }
  template <class It>
  void append(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  // Removes the elements pred accepts, keeping the order of the rest.
  template <class Pred>
  std::size_t erase_if(Pred pred) {
    std::size_t out = 0;
    for (std::size_t i = 0; i < size_; ++i)
      if (!pred(data_[i])) {
        if (out != i) data_[out] = std::move(data_[i]);
        ++out;
      }
    std::size_t removed = size_ - out;
    while (size_ > out) pop_back();
    return removed;
  }

  // Insertion sort: the vectors here are small.
  template <class Less>
  void sort(Less less) {
    for (std::size_t i = 1; i < size_; ++i) {
      T v = std::move(data_[i]);
      std::size_t j = i;
      for (; j > 0 && less(v, data_[j - 1]); --j) data_[j] = std::move(data_[j - 1]);
      data_[j] = std::move(v);
    }
  }

 private:
  T *inline_data() { return reinterpret_cast<T *>(storage_); }

  void grow(std::size_t cap) {
    T *p = static_cast<T *>(std::malloc(cap * sizeof(T)));
    if (!p) throw std::bad_alloc();
    for (std::size_t i = 0; i < size_; ++i) {
      new (p + i) T(std::move(data_[i]));
      data_[i].~T();
    }
    if (data_ != inline_data()) std::free(data_);
    data_ = p;
    cap_ = cap;
  }

  alignas(T) unsigned char storage_[N * sizeof(T)];
  T *data_ = inline_data();
  std::size_t size_ = 0, cap_ = N;
};

}  // namespace geom
